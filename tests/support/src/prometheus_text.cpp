#include "gpujoin/testing/prometheus_text.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace gpujoin::testing {

double MetricValue(const std::string& exposition, const std::string& series) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return std::nan("");
}

}  // namespace gpujoin::testing
