# nanovllm_add_gtest(<name> SOURCES <src...> LIBS <lib...> [LABELS <label...>])
# One executable per test file; every TEST is registered with ctest through
# gtest_discover_tests so plain `ctest` runs them all. GPU suites pass LABELS gpu.
function(nanovllm_add_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main nanovllm_warnings)
  set(props "")
  if(ARG_LABELS)
    set(props PROPERTIES LABELS "${ARG_LABELS}")
  endif()
  gtest_discover_tests(${name}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    DISCOVERY_TIMEOUT 60
    ${props})
endfunction()
