package kvexact

/*
#include <stdlib.h>
#include "kvexact.h"
*/
import "C"

// Refusal codes a caller may name when lifting (the C ABI's KVEXACT_REFUSAL_* values).
const (
	RefusalTools                Refusal = C.KVEXACT_REFUSAL_TOOLS
	RefusalTemplateKwargs       Refusal = C.KVEXACT_REFUSAL_TEMPLATE_KWARGS
	RefusalAddGenerationPrompt  Refusal = C.KVEXACT_REFUSAL_ADD_GENERATION_PROMPT
	RefusalContinueFinalMessage Refusal = C.KVEXACT_REFUSAL_CONTINUE_FINAL_MESSAGE
	RefusalMessageField         Refusal = C.KVEXACT_REFUSAL_MESSAGE_FIELD
	RefusalNullContent          Refusal = C.KVEXACT_REFUSAL_NULL_CONTENT
	RefusalInputTooLarge        Refusal = C.KVEXACT_REFUSAL_INPUT_TOO_LARGE
	// RefusalAmbiguousAddedToken: the text holds an added token the engine's tokenizer loader
	// may or may not keep (the profile pins no tokenizer_config.json); never liftable. The
	// error names the token and the remedy (pin tokenizerConfigArtifact).
	RefusalAmbiguousAddedToken Refusal = C.KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN
	// RefusalNulByte: a NUL byte in the prompt text or the rendered prompt; never liftable.
	RefusalNulByte Refusal = C.KVEXACT_REFUSAL_NUL_BYTE
	// RefusalTemplateRaised: the template (or the engine's renderer) raised, refused the
	// messages or rendered empty; for completions, a path no vectors prove. Never liftable.
	RefusalTemplateRaised Refusal = C.KVEXACT_REFUSAL_TEMPLATE_RAISED
)

// RefusalBitTools is the lift bit of RefusalTools (KVEXACT_REFUSAL_BIT_TOOLS), for
// EncoderOptions.Lifted.
const RefusalBitTools = uint32(C.KVEXACT_REFUSAL_BIT_TOOLS)

// RefusalBit is the lift bit of r for EncoderOptions.Lifted (kvexact_refusal_bit; 0 for a
// value libkvexact does not define).
func RefusalBit(r Refusal) uint32 { return uint32(C.kvexact_refusal_bit(C.kvexact_refusal(r))) }

// ParseRefusalBits turns comma-separated refusal names, as `kvexact encode --allow` takes
// them ("tools,message_field"), into a lift mask (kvexact_refusal_bits_parse).
func ParseRefusalBits(names string) (uint32, error) {
	b := []byte(names)
	var bits C.uint32_t
	var cerr *C.kvexact_error
	st := C.kvexact_refusal_bits_parse(bytesPtr(b), C.size_t(len(b)), &bits, &cerr)
	if st != C.KVEXACT_OK {
		return 0, takeError(st, cerr)
	}
	return uint32(bits), nil
}
