# Replays the saved fuzz regressions (tests/fuzz_regressions/<target>/) in the regular build
# (docs/fuzzing.md, "Regressions"): each fuzz target's source, compiled without libFuzzer, linked
# with fuzz/replay_main.cpp, is run by one CTest test over its directory. Included from
# tests/CMakeLists.txt, so the release and asan presets both run it.
foreach(csim_fuzz_pair "scenario:csim_scenario" "trace_reader:csim_profiler"
                       "tolerances:csim_profiler" "replay_importer:csim_replay_import")
  string(REPLACE ":" ";" csim_fuzz_pair "${csim_fuzz_pair}")
  list(GET csim_fuzz_pair 0 csim_fuzz_target)
  list(GET csim_fuzz_pair 1 csim_fuzz_lib)
  add_executable(fuzz_replay_${csim_fuzz_target}
                 ${PROJECT_SOURCE_DIR}/fuzz/fuzz_${csim_fuzz_target}.cpp
                 ${PROJECT_SOURCE_DIR}/fuzz/replay_main.cpp)
  target_link_libraries(fuzz_replay_${csim_fuzz_target} PRIVATE ${csim_fuzz_lib})
  add_test(NAME fuzz_regressions:${csim_fuzz_target}
           COMMAND fuzz_replay_${csim_fuzz_target}
                   ${PROJECT_SOURCE_DIR}/tests/fuzz_regressions/fuzz_${csim_fuzz_target})
  set_tests_properties(fuzz_regressions:${csim_fuzz_target} PROPERTIES TIMEOUT 120)
endforeach()
