# Deployment kit checks (docs/deploy.md), label "deploy". Quick ones only: the Debian package's
# contents (cpack from this build folder), the systemd unit, the Prometheus rules and config, the
# Kubernetes manifests, and the metric names every kit file queries against a live scrape. The
# end-to-end runs (tests/deploy/deb.sh: debootstrap + apt install + serve; tests/deploy/container.sh:
# podman build + run + SIGTERM) need root and a Debian mirror and take minutes: documented scripts.
set(tm_deploy ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME deploy_systemd_unit
         COMMAND ${tm_deploy}/verify_unit.sh ${CMAKE_BINARY_DIR}/tokenmill.service $<TARGET_FILE:tokenmill>)
add_test(NAME deploy_package COMMAND ${tm_deploy}/package_contents.sh ${CMAKE_BINARY_DIR})
set_tests_properties(deploy_systemd_unit deploy_package PROPERTIES LABELS "deploy" SKIP_RETURN_CODE 77 TIMEOUT 300)
find_program(TM_PROMTOOL promtool)
if(TM_PROMTOOL)
  add_test(NAME deploy_prometheus_rules
           COMMAND sh -c "promtool check rules alert-rules.yml && promtool test rules alert-rules.test.yml && promtool check config prometheus.yml"
           WORKING_DIRECTORY ${TM_SOURCE_DIR}/deploy/prometheus)
  set_tests_properties(deploy_prometheus_rules PROPERTIES LABELS "deploy" TIMEOUT 60)
endif()
find_program(TM_PYTHON3 python3)
if(TM_PYTHON3)
  add_test(NAME deploy_k8s_manifests
           COMMAND ${TM_PYTHON3} ${tm_deploy}/check_manifests.py ${TM_SOURCE_DIR} $<TARGET_FILE:tokenmill>)
  set_tests_properties(deploy_k8s_manifests PROPERTIES LABELS "deploy" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
find_program(TM_NODE node)
if(TM_NODE)
  add_test(NAME deploy_metrics_coverage COMMAND ${TM_NODE} ${tm_deploy}/metrics_coverage.mjs WORKING_DIRECTORY ${tm_deploy})
  set_tests_properties(deploy_metrics_coverage PROPERTIES LABELS "deploy;e2e" TIMEOUT 120
                       ENVIRONMENT "TM_BINARY=$<TARGET_FILE:tokenmill>;TM_SOURCE_DIR=${TM_SOURCE_DIR}")
endif()
