// write_svg: hand-made SVG (no plotting library on the machines ibcoll runs on). Log-scaled
// size on x; latency on a log y axis, bus bandwidth on a linear one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "tools/bench/axis_ticks.h"
#include "tools/bench/report.h"

namespace ibcoll::bench {
namespace {

constexpr double kChartWidth = 460, kChartHeight = 280, kMargin = 60;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

struct Chart {
  std::string title, y_label;
  bool log_y;
  double (*value)(const Measurement&);
};

void draw_chart(std::FILE* f, double left, double top, const Chart& chart,
                const std::map<std::string, std::vector<const Measurement*>>& lines) {
  double x_min = 1e300, x_max = 0, y_min = 1e300, y_max = 0;
  for (const auto& [library, points] : lines) {
    for (const Measurement* m : points) {
      x_min = std::min(x_min, std::log2(static_cast<double>(m->bytes)));
      x_max = std::max(x_max, std::log2(static_cast<double>(m->bytes)));
      y_min = std::min(y_min, chart.value(*m));
      y_max = std::max(y_max, chart.value(*m));
    }
  }
  const std::vector<double> ticks =
      chart.log_y ? axis_ticks(std::max(y_min, 1e-3), std::max(y_max, 1e-3), true)
                  : axis_ticks(0, y_max, false);
  y_min = chart.log_y ? std::log10(ticks.front()) : ticks.front();
  y_max = chart.log_y ? std::log10(ticks.back()) : ticks.back();
  if (x_max <= x_min) x_max = x_min + 1;
  auto x_of = [&](double bytes) {
    return left + (std::log2(bytes) - x_min) / (x_max - x_min) * kChartWidth;
  };
  auto y_of = [&](double v) {
    const double t = chart.log_y ? std::log10(std::max(v, 1e-3)) : v;
    return top + kChartHeight - (t - y_min) / (y_max - y_min) * kChartHeight;
  };
  std::fprintf(f, "<text x='%.0f' y='%.0f' font-weight='bold'>%s</text>\n", left, top - 12,
               chart.title.c_str());
  std::fprintf(f,
               "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' stroke='#888'/>\n",
               left, top, kChartWidth, kChartHeight);
  for (double e = x_min; e <= x_max; e += 2) {
    const double x = x_of(std::exp2(e));
    std::fprintf(f, "<text x='%.1f' y='%.0f' font-size='10' text-anchor='middle'>%s</text>\n", x,
                 top + kChartHeight + 14, format_bytes(static_cast<size_t>(std::exp2(e))).c_str());
  }
  for (double v : ticks) {
    std::fprintf(f, "<text x='%.0f' y='%.1f' font-size='10' text-anchor='end'>%g</text>\n",
                 left - 4, y_of(v) + 3, v);
  }
  std::fprintf(f,
               "<text x='%.0f' y='%.0f' font-size='11' transform='rotate(-90 %.0f %.0f)' "
               "text-anchor='middle'>%s</text>\n",
               left - 44, top + kChartHeight / 2, left - 44, top + kChartHeight / 2,
               chart.y_label.c_str());
  size_t color = 0;
  for (const auto& [library, points] : lines) {
    std::fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='",
                 kColors[color % 4]);
    for (const Measurement* m : points)
      std::fprintf(f, "%.1f,%.1f ", x_of(static_cast<double>(m->bytes)), y_of(chart.value(*m)));
    std::fprintf(f, "'/>\n<text x='%.0f' y='%.0f' fill='%s' font-size='12'>%s</text>\n", left + 10,
                 top + 16 + 14.0 * static_cast<double>(color), kColors[color % 4], library.c_str());
    ++color;
  }
}

}  // namespace

void write_svg(const std::string& path, const std::vector<Measurement>& all) {
  std::map<Collective, std::map<std::string, std::vector<const Measurement*>>> by_collective;
  for (const Measurement& m : all)
    by_collective[m.collective][m.library].push_back(&m);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  const double width = 2 * (kChartWidth + 2 * kMargin);
  const double height = static_cast<double>(by_collective.size()) * (kChartHeight + 2 * kMargin);
  std::fprintf(f,
               "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
               "font-family='sans-serif' font-size='13'>\n<rect width='100%%' height='100%%' "
               "fill='white'/>\n",
               width, height);
  double top = kMargin;
  for (const auto& [collective, lines] : by_collective) {
    const int ranks = lines.begin()->second.front()->ranks;
    const std::string name =
        std::string(collective_name(collective)) + ", " + std::to_string(ranks) + " ranks: ";
    draw_chart(f, kMargin, top,
               {name + "latency", "µs (log)", true, [](const Measurement& m) { return m.avg_us; }},
               lines);
    draw_chart(
        f, kChartWidth + 3 * kMargin, top,
        {name + "bus bandwidth", "GB/s", false, [](const Measurement& m) { return m.busbw; }},
        lines);
    top += kChartHeight + 2 * kMargin;
  }
  std::fprintf(f, "</svg>\n");
  std::fclose(f);
}

}  // namespace ibcoll::bench
