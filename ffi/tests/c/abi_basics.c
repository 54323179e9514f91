/* ABI basics: names, error objects, NULL and out-of-range arguments are statuses. */
#include "kvexact.h"
#include "kvexact.h" /* double inclusion must be harmless */
#include "check.h"

static void names(void) {
  CHECK(strlen(kvexact_version()) > 0);
  CHECK_STR(kvexact_status_name(KVEXACT_OK), "ok");
  CHECK_STR(kvexact_status_name(KVEXACT_ERR_REQUEST), "request");
  CHECK_STR(kvexact_status_name(KVEXACT_ERR_NOT_READY), "not_ready");
  CHECK_STR(kvexact_status_name(KVEXACT_ERR_NULL_ARGUMENT), "null_argument");
  CHECK_STR(kvexact_status_name(12345), "unrecognized_status");
  /* The encode-path codes are the gateway's LLB_KV_TOK_ERR_* values. */
  CHECK_INT(KVEXACT_ERR_REQUEST, -1);
  CHECK_INT(KVEXACT_ERR_UNSUPPORTED, -2);
  CHECK_INT(KVEXACT_ERR_PROFILE, -3);
  CHECK_INT(KVEXACT_ERR_RENDERER, -4);
  CHECK_INT(KVEXACT_ERR_TOKENIZER, -5);
  CHECK_INT(KVEXACT_ERR_UNKNOWN, -6);
  CHECK_INT(KVEXACT_ERR_NOT_READY, -7);
  CHECK(KVEXACT_ERR_PANIC <= -100 && KVEXACT_ERR_NULL_ARGUMENT <= -100);
  CHECK_INT(10 - KVEXACT_ERR_REQUEST, 11); /* negative #defines are parenthesized */

  CHECK_STR(kvexact_refusal_name(KVEXACT_REFUSAL_NONE), "none");
  CHECK_STR(kvexact_refusal_name(KVEXACT_REFUSAL_TOOLS), "tools");
  CHECK_STR(kvexact_refusal_name(KVEXACT_REFUSAL_MULTI_TEXT_PART), "multi_text_part");
  CHECK_STR(kvexact_refusal_name(KVEXACT_REFUSAL_NUL_BYTE), "nul_byte");
  CHECK_STR(kvexact_refusal_name(KVEXACT_REFUSAL_INPUT_TOO_LARGE), "input_too_large");
  CHECK_STR(kvexact_refusal_name(KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN), "ambiguous_added_token");
  CHECK_STR(kvexact_refusal_name(KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN + 1), "unrecognized_refusal");
  CHECK_STR(kvexact_refusal_name((kvexact_refusal)-1), "unrecognized_refusal");
}

static void null_error_object(void) {
  CHECK_INT(kvexact_error_status(NULL), KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_STR(kvexact_error_code(NULL), "");
  CHECK_STR(kvexact_error_message(NULL), "");
  CHECK(kvexact_error_path(NULL) == NULL);
  kvexact_error_free(NULL);
}

int main(void) {
  names();
  null_error_object();
  printf("abi_basics: ok\n");
  return 0;
}
