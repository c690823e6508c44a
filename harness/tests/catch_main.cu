// The Catch2 main of the C++ host tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
