// Forwards to wire/request_checks.hpp, where the checks of request integers
// live beside the decoders that use them; ops/aggregate.cpp includes this path.
#pragma once

#include "wire/request_checks.hpp"
