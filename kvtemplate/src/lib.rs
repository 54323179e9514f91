//! # kvtemplate — strict requests, HF-exact chat rendering, engine-exact tokenization
//!
//! Will hold: the borrowed OpenAI request model, the strict refusal scan (spec/registry.md §9),
//! chat rendering with minijinja configured like Hugging Face transformers (spec/templates.md),
//! and tokenization with the pinned `tokenizer.json` per engine contract.
