// Internal (CUDA builds only): the device-level API of the CUDA backend, one
// include for the table and its build and lookup (cuda/index/, table.hpp for
// the layout) and the joins (cuda/join/join_ops.hpp). Every function takes
// device pointers, enqueues work on the given stream and returns without
// synchronising. The backend lowers command-graph nodes onto these; the kernel
// benchmark (bench/) calls them directly on device-resident data.
#pragma once

#include "cuda/index/build.hpp"
#include "cuda/index/lookup.hpp"
#include "cuda/index/table.hpp"
#include "cuda/join/join_ops.hpp"
