// The unit-test binary: doctest's runner; every test/unit/*_test.cc adds its cases.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
