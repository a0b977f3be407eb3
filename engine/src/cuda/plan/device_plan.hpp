// Internal (CUDA builds only): a batch of a plan on the device
// (gpujoin/engine/plan_device.hpp) on one stream context: the input columns
// uploaded once, every lookup (key words, probe, payload gathers) and filter
// narrowing one live-row mask, the group keys coded in a device table, as one
// program (plan_program.hpp; a CUDA Graph when its shape repeats); the host
// waits once for the step counters and the distinct keys (or a row plan's
// rows), then once per measure (AggregateDevice).
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/stream_context.hpp"
#include "gpujoin/engine/plan_device.hpp"

namespace gpujoin::engine::detail {

/// Gives the context back when the batch ends; `failed` when a call of the
/// batch failed (the backend then waits for the stream and checks the device).
using ReleaseStreamContext = std::function<void(std::unique_ptr<StreamContext>, bool failed)>;

/// Runs `input`'s steps and group keys on `ctx` (of device `device`).
absl::StatusOr<std::unique_ptr<DevicePlanBatch>> StartDevicePlanBatch(
    const DevicePlanInput& input, int device, std::unique_ptr<StreamContext> ctx,
    ReleaseStreamContext release);

}  // namespace gpujoin::engine::detail
