# `tokenmill bench serve` end to end: the stub OpenAI-compatible server as a process, and the HTML
# report rendered in headless Chromium (skipped, exit 77, when chromium is not installed).
add_executable(tm_stub_openai_server ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/stub_main.cpp
                                     ${CMAKE_CURRENT_SOURCE_DIR}/unit/bench/stub_server.cpp)
target_include_directories(tm_stub_openai_server PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/bench)
target_link_libraries(tm_stub_openai_server PRIVATE tm_bench)
add_test(NAME bench_serve.html_report_chromium
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/bench_serve/report_chromium_test.sh
                 $<TARGET_FILE:tokenmill> $<TARGET_FILE:tm_stub_openai_server>
                 ${CMAKE_CURRENT_BINARY_DIR}/bench_serve_report)
set_tests_properties(bench_serve.html_report_chromium PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 400 LABELS "bench_serve;e2e")
