# llama.cpp reads tokenmill's GGUF files (tests/llamacpp/interop.mjs): logits of tokenmill's forward
# pass against llama.cpp's on the same files, greedy output, tokenization. llama.cpp comes prebuilt
# through the node-llama-cpp npm package (`npm install --omit=optional --ignore-scripts` with the committed lock in this folder:
# scripts/test.sh and .ci/run do it). Exit 77 (skipped) when that package or its binary is unusable.
find_program(TM_NODE node)
if(TM_NODE)
  add_test(NAME e2e_llamacpp_interop COMMAND ${TM_NODE} ${CMAKE_CURRENT_LIST_DIR}/interop.mjs
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(e2e_llamacpp_interop PROPERTIES
                       ENVIRONMENT "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR}"
                       LABELS "e2e;slow" TIMEOUT 900 SKIP_RETURN_CODE 77)
  # "slow": ~100 files through `tokenmill eval logits`; it runs in the release suite, and the sanitizer
  # pass of .ci/run skips it (under ASan it takes several minutes; the kernels it exercises have their
  # own sanitized unit tests).
endif()
# LoRA adapters written by `tokenmill lora dummy`: llama.cpp loads them and its logits with the adapter
# match tokenmill's (--lora and the merged model) (tests/llamacpp/lora.mjs).
if(TM_NODE)
  add_test(NAME e2e_llamacpp_lora COMMAND ${TM_NODE} ${CMAKE_CURRENT_LIST_DIR}/lora.mjs
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(e2e_llamacpp_lora PROPERTIES
                       ENVIRONMENT "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR}"
                       LABELS "e2e" TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# Sliding windows, gemma2, gemma3 and YaRN against llama.cpp (tests/llamacpp/swa.mjs): tiny dummies of
# each, logits compared by KL divergence and top-1 agreement over a context past the windows. "slow":
# ~55 s in a release build (measured 2026-12-02, machine shared with builds), so the sanitizer pass
# skips it as it skips interop.mjs; the release suite runs it.
if(TM_NODE)
  add_test(NAME e2e_llamacpp_swa COMMAND ${TM_NODE} ${CMAKE_CURRENT_LIST_DIR}/swa.mjs
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(e2e_llamacpp_swa PROPERTIES
                       ENVIRONMENT "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR}"
                       LABELS "e2e;slow" TIMEOUT 600 SKIP_RETURN_CODE 77)
endif()
# Embedding models written by `tokenmill dummy` (bert, nomic-bert, a bert reranker, a Qwen3-Reranker, gemma-embedding, qwen3 / llama with a
# pooling type): llama.cpp's embeddings and rerank scores match `tokenmill embed` (tests/llamacpp/embed.mjs).
if(TM_NODE)
  add_test(NAME e2e_llamacpp_embed COMMAND ${TM_NODE} ${CMAKE_CURRENT_LIST_DIR}/embed.mjs
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(e2e_llamacpp_embed PROPERTIES
                       ENVIRONMENT "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR}"
                       LABELS "e2e" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
# gpt-oss (tests/llamacpp/gptoss.mjs): tiny dummies with sliding windows, sinks, YaRN and MXFP4
# experts; llama.cpp's logits against tokenmill's (KL < 1e-4, top-1 >= 99.5 %) and its greedy output.
# 6-9 s in a release build (measured 2026-12-02, machine shared with builds): not "slow".
if(TM_NODE)
  add_test(NAME e2e_llamacpp_gptoss COMMAND ${TM_NODE} ${CMAKE_CURRENT_LIST_DIR}/gptoss.mjs
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(e2e_llamacpp_gptoss PROPERTIES
                       ENVIRONMENT "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR}"
                       LABELS "e2e" TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# The lattice i-quants (tests/llamacpp/iquants.mjs): a tiny llama quantized to IQ2_XXS, IQ2_XS, IQ2_S,
# IQ3_XXS, IQ3_S, IQ1_S and IQ1_M by llama.cpp's own quantizer (ggml_quantize.c, compiled by the test against
# node-llama-cpp's libggml-base.so), and a small MoE's experts in IQ3_S and IQ2_XXS; tokenmill's logits on
# those files against llama.cpp's. IQ3_XXS, IQ3_S and IQ2_XXS by default (~8 s of CPU, 25 s wall on the
# shared 2-core machine, 2026-12-02); TM_IQ_ALL=1 adds IQ2_XS, IQ2_S, IQ1_S, IQ1_M (~35 s more: llama.cpp's
# 1-2 bit quantizers set up grid tables first). All seven are checked bit for bit against llama.cpp's
# dequantizers by test_quant (IqLattice.*). Then `tokenmill quantize` writes the llama in each of the
# seven (--pure, an imatrix of ones as ggml_quantize.c uses): llama.cpp loads them, and where its own
# file of the type was made in the run, its logits on both files are equal exactly (~1 s more).
if(TM_NODE)
  add_test(NAME e2e_llamacpp_iquants COMMAND ${TM_NODE} ${CMAKE_CURRENT_LIST_DIR}/iquants.mjs
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(e2e_llamacpp_iquants PROPERTIES
                       ENVIRONMENT "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR}"
                       LABELS "e2e" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
# Gemma 1, Granite, SmolLM3 (NoPE layers), OLMo 2 and OLMo 3 (post-norms only, windows) against llama.cpp
# (tests/llamacpp/families.mjs): tiny dummies of each in F32, F16, Q8_0 and Q4_K_M, logits compared by KL
# divergence, top-1 agreement and relative rms over 133 positions.
if(TM_NODE)
  add_test(NAME e2e_llamacpp_families COMMAND ${TM_NODE} ${CMAKE_CURRENT_LIST_DIR}/families.mjs
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(e2e_llamacpp_families PROPERTIES
                       ENVIRONMENT "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR}"
                       LABELS "e2e" TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
