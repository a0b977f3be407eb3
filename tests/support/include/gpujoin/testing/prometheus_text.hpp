// Reading one sample out of a Prometheus text exposition (what /metrics serves).
#pragma once

#include <string>

namespace gpujoin::testing {

/// The value of the sample line `series` (exact name with labels, e.g.
/// `gpujoin_indexes` or `gpujoin_query_rows_total{index="a",op="lookup"}`) in a
/// Prometheus text exposition; NaN when absent.
double MetricValue(const std::string& exposition, const std::string& series);

}  // namespace gpujoin::testing
