# The module graph check: every #include "<module>/..." is declared in src/CMakeLists.txt, the graph
# points one way, unit tests link only their module (+ fixtures), and docs/ARCHITECTURE.md's list
# matches. `build/tests/module_deps . --print` prints the list for the document.
add_executable(module_deps ${CMAKE_CURRENT_LIST_DIR}/module_deps.cpp)
add_test(NAME module_deps COMMAND module_deps ${TM_SOURCE_DIR})
set_tests_properties(module_deps PROPERTIES LABELS "unit")
