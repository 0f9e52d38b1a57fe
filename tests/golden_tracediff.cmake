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
