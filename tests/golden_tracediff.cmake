# One golden's tracediff verdict (tests/CMakeLists.txt adds one CTest test per line of
# traces/goldens.txt): regenerate the scenario with simrun, then diff it against the golden with
# tracediff. Exact equality is tests/test_golden.cpp's job; this shows what a CI job would see.
#   cmake -DSIMRUN=... -DTRACEDIFF=... -DSOURCE_DIR=... -DGOLDEN=x.trace.json -DSCENARIO=x.json
#         -DSETS="a=1,b=2"|- -DWORK_DIR=... -P golden_tracediff.cmake
set(args "${SOURCE_DIR}/scenarios/${SCENARIO}" -q)
if(NOT SETS STREQUAL "-")
  string(REPLACE "," ";" sets "${SETS}")
  foreach(s IN LISTS sets)
    list(APPEND args --set "${s}")
  endforeach()
endif()
file(MAKE_DIRECTORY "${WORK_DIR}")
set(out "${WORK_DIR}/${GOLDEN}")
if(GOLDEN MATCHES "\\.trace\\.json$")
  list(APPEND args -o "${out}")
else()
  list(APPEND args --summary "${out}")
endif()
execute_process(COMMAND "${SIMRUN}" ${args} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "simrun ${args} failed with ${rc}")
endif()
execute_process(COMMAND "${TRACEDIFF}" "${SOURCE_DIR}/traces/${GOLDEN}" "${out}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tracediff: ${GOLDEN} regressed (exit ${rc}); if intended, run scripts/refresh-goldens.sh")
endif()
# Within tolerance is not enough for a golden: the simulator is deterministic, so a summary's bytes
# match. (A full trace records the scenario's path, which differs here; tests/test_golden.cpp
# compares trace goldens byte for byte in-process.)
if(GOLDEN MATCHES "\\.summary\\.json$")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${SOURCE_DIR}/traces/${GOLDEN}" "${out}"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${GOLDEN}: within tolerance but not byte-identical; if intended, run scripts/refresh-goldens.sh")
  endif()
endif()
