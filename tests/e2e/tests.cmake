# End-to-end tests: tests/e2e/*.test.mjs run with `node --test` against a real `tokenmill serve`
# (started by each file on a free loopback port, see lib/server.mjs). *.slow.test.mjs files get the
# label "slow" (the sanitizer pass of .ci/run skips them). Needs Node >= 20 and `npm ci` in
# tests/e2e (scripts/test.sh and .ci/run do it); without node the tests are not registered.
find_program(TM_NODE node)
if(TM_NODE)
  set(tm_e2e_dir ${CMAKE_CURRENT_LIST_DIR})
  # TM_E2E_OUT: where tests leave artifacts (ui.test.mjs: screenshots of the web pages in ui/).
  set(tm_e2e_env "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR};TM_E2E_OUT=${CMAKE_CURRENT_BINARY_DIR}/e2e_out")
  file(GLOB tm_e2e_tests CONFIGURE_DEPENDS ${tm_e2e_dir}/*.test.mjs)
  foreach(f ${tm_e2e_tests})
    get_filename_component(n ${f} NAME)
    string(REGEX REPLACE "\\.test\\.mjs$" "" n ${n})
    string(REPLACE "." "_" n ${n})
    add_test(NAME e2e_${n} COMMAND ${TM_NODE} --test ${f} WORKING_DIRECTORY ${tm_e2e_dir})
    set(labels "e2e")
    if(f MATCHES "\\.slow\\.test\\.mjs$")
      list(APPEND labels "slow")
    endif()
    if(n STREQUAL "ui")  # the web pages in headless chromium (ui.test.mjs; skips itself without it)
      list(APPEND labels "ui")
    endif()
    set_tests_properties(e2e_${n} PROPERTIES ENVIRONMENT "${tm_e2e_env}" LABELS "${labels}" TIMEOUT 900)
  endforeach()
  # promtool check metrics on a live scrape; skipped (exit 77) when promtool is absent.
  add_test(NAME e2e_promtool_metrics COMMAND ${TM_NODE} ${tm_e2e_dir}/promtool.mjs WORKING_DIRECTORY ${tm_e2e_dir})
  set_tests_properties(e2e_promtool_metrics PROPERTIES ENVIRONMENT "${tm_e2e_env}" LABELS "e2e" TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endif()
