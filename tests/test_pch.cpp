// The translation unit that compiles the tests' precompiled header (tests/CMakeLists.txt,
// csim_test_pch; docs/ci.md, "Build time"). It has no code of its own.
