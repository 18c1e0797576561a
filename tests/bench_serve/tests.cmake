# `tokenmill bench serve` end to end: the stub OpenAI-compatible server as a process, and the HTML
# report rendered in headless Chromium (skipped, exit 77, when chromium is not installed).
add_executable(tm_stub_openai_server ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/stub_main.cpp
                                     ${CMAKE_CURRENT_SOURCE_DIR}/unit/loadgen/stub_server.cpp)
target_include_directories(tm_stub_openai_server PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/loadgen)
target_link_libraries(tm_stub_openai_server PRIVATE tm_loadgen)
add_test(NAME bench_serve.html_report_chromium
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/report_chromium_test.sh
                 $<TARGET_FILE:tokenmill> $<TARGET_FILE:tm_stub_openai_server>
                 ${CMAKE_CURRENT_BINARY_DIR}/bench_serve_report)
set_tests_properties(bench_serve.html_report_chromium PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 400 LABELS "bench_serve;e2e")

# Against the REAL server (`tokenmill serve` on the bundled stories260K, each test starting its own on
# a free port): all six scenarios in short mode, token counts and TTFT/TPOT against the server's own
# /metrics (tests/bench_serve/real_*_test.cpp, one gtest binary; artifacts in bench_serve_real/), and
# the HTML report of a real-server run in headless Chromium (skipped, exit 77, without chromium).
add_executable(test_bench_serve_real ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/real_scenarios_test.cpp
                                     ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/real_accounting_test.cpp
                                     ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/real_bench.cpp
                                     ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/serve_process.cpp
                                     ${CMAKE_CURRENT_SOURCE_DIR}/support/test_support.cpp)
target_include_directories(test_bench_serve_real PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support)
target_link_libraries(test_bench_serve_real PRIVATE tm_loadgen GTest::gtest_main)
target_compile_definitions(test_bench_serve_real PRIVATE TM_SOURCE_DIR="${TM_SOURCE_DIR}"
                           TM_BINARY_PATH="$<TARGET_FILE:tokenmill>")
add_dependencies(test_bench_serve_real tokenmill)
set(tm_bench_real_env "${TM_TEST_ENV};TM_BENCH_SERVE_OUT=${CMAKE_CURRENT_BINARY_DIR}/bench_serve_real")
foreach(t AllScenariosShortPass OomBoundaryFullSizesPromptsInServerTokens TokenCountsEqualServerCounters
          LatencyAgreesWithServerHistograms)
  add_test(NAME bench_serve.real_server.${t} COMMAND test_bench_serve_real --gtest_filter=RealServer.${t})
  # RESOURCE_LOCK: one real-server load test at a time (they time latencies on a 2-core machine).
  set_tests_properties(bench_serve.real_server.${t} PROPERTIES ENVIRONMENT "${tm_bench_real_env}"
                       TIMEOUT 900 LABELS "bench_serve;e2e" RESOURCE_LOCK tm_bench_serve_real)
endforeach()
add_test(NAME bench_serve.real_server.html_report_chromium
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/real_report_chromium_test.sh $<TARGET_FILE:tokenmill>
                 ${CMAKE_CURRENT_BINARY_DIR}/bench_serve_real/report_chromium)
set_tests_properties(bench_serve.real_server.html_report_chromium PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "bench_serve;e2e" RESOURCE_LOCK tm_bench_serve_real)

# The recovery scenario's restart mode against the real server (SIGKILL + restart in the middle of
# the load: time until it serves again, requests lost), and SIGHUP reloading --api-key-file. ~8 s.
add_test(NAME bench_serve.recovery_restart
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/restart_test.sh $<TARGET_FILE:tokenmill>
                 ${TM_SOURCE_DIR}/models/stories260K/stories260K.gguf ${CMAKE_CURRENT_BINARY_DIR}/bench_serve_restart)
set_tests_properties(bench_serve.recovery_restart PROPERTIES TIMEOUT 90 LABELS "bench_serve;e2e"
                     RESOURCE_LOCK tm_bench_serve_real)
