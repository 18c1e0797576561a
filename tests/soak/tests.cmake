# The soak and fault suite (tests/soak/soak.mjs, see tests/soak/README.md): the short version, 32 clients
# for 60 s with 200 idle/slowloris sockets, runs with the suite; labelled "slow" so the sanitizer pass
# of .ci/run skips it. Longer runs are a documented command, not part of the suite.
find_program(TM_NODE node)
if(TM_NODE)
  add_test(NAME soak_short
           COMMAND ${TM_NODE} ${CMAKE_CURRENT_LIST_DIR}/soak.mjs --clients 32 --seconds 60 --idle 200
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(soak_short PROPERTIES ENVIRONMENT "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR}"
                       LABELS "soak;slow" TIMEOUT 300)
endif()
