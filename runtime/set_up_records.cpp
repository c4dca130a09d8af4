#include "runtime/set_up_records.h"

#include <charconv>
#include <string_view>
#include <utility>

namespace ibcoll::runtime {
namespace {

Error malformed(const std::string& what, int rank) {
  return Error(Code::mismatch, "rank " + std::to_string(rank) + "'s " + what +
                                   " is malformed (is it of another ibcoll version?)");
}

// The number that is all of `text`, or false.
template <typename Number>
bool whole_number(std::string_view text, Number& value) {
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  return !text.empty() && error == std::errc() && stop == end;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

}  // namespace

std::string ok_part(const std::string& result) {
  return "o" + result;
}

std::string failed_part(const Status& status, const std::string& host) {
  return "e" + std::to_string(static_cast<int>(status.code())) + ":host " + host + ": " +
         status.message();
}

std::vector<std::string> results_of_step(const std::string& step, std::vector<std::string> parts) {
  for (size_t r = 0; r < parts.size(); ++r) {
    const std::string& part = parts[r];
    if (!part.empty() && part[0] == 'o') continue;
    const size_t colon = part.find(':');
    int code = 0;
    const bool said = !part.empty() && part[0] == 'e' && colon != std::string::npos &&
                      whole_number(std::string_view(part).substr(1, colon - 1), code);
    const bool known = said && code > 0 && code <= static_cast<int>(Code::internal);
    throw Error(known ? static_cast<Code>(code) : Code::internal,
                "set-up (" + step + ") failed on rank " + std::to_string(r) + ", " +
                    (said ? part.substr(colon + 1) : "which sent no part of this version"));
  }
  for (std::string& part : parts)
    part.erase(0, 1);
  return parts;
}

std::string start_record(const StartRecord& start) {
  return start.secret + "\n" + start.settings;
}

StartRecord read_start_record(const std::string& record) {
  const size_t end = record.find('\n');
  if (end == std::string::npos) return {record, ""};
  return {record.substr(0, end), record.substr(end + 1)};
}

void check_shared_settings(const std::vector<std::string>& settings) {
  if (settings.empty()) return;
  // "NAME=VALUE": the value, where the line names `name`; the whole line otherwise.
  auto value_of = [](std::string_view line, std::string_view name) {
    const bool named = line.size() > name.size() && line.substr(0, name.size()) == name &&
                       line[name.size()] == '=';
    return std::string(named ? line.substr(name.size() + 1) : line);
  };
  const std::vector<std::string_view> reference = lines_of(settings[0]);
  // Split once, and only the ranks whose settings differ (at scale, nearly none).
  std::vector<std::pair<size_t, std::vector<std::string_view>>> differing;
  for (size_t r = 1; r < settings.size(); ++r)
    if (settings[r] != settings[0]) differing.emplace_back(r, lines_of(settings[r]));
  std::string differences;
  for (size_t line = 0; line < reference.size(); ++line) {
    const std::string_view want = reference[line];
    const std::string_view name = want.substr(0, want.find('='));
    std::string others;
    for (const auto& [r, theirs] : differing) {
      if (line < theirs.size() && theirs[line] == want) continue;
      others += ", rank " + std::to_string(r) + " has " +
                (line < theirs.size() ? value_of(theirs[line], name) : "none");
    }
    if (!others.empty()) {
      differences += (differences.empty() ? "" : "; ") + std::string(name) + ": rank 0 has " +
                     value_of(want, name) + others;
    }
  }
  if (!differences.empty()) {
    throw Error(Code::invalid_argument,
                "settings that every rank must have alike differ: " + differences);
  }
}

std::string place_record(const PlaceRecord& place) {
  return place.node + "\n" + place.cpus + "\n" + std::to_string(place.package);
}

PlaceRecord read_place_record(const std::string& record, int rank) {
  const size_t first = record.find('\n');
  const size_t second = first == std::string::npos ? first : record.find('\n', first + 1);
  PlaceRecord place;
  if (second == std::string::npos ||
      !whole_number(std::string_view(record).substr(second + 1), place.package)) {
    throw malformed("placement", rank);
  }
  place.node = record.substr(0, first);
  place.cpus = record.substr(first + 1, second - first - 1);
  return place;
}

std::string single_copy_record(const SingleCopyRecord& verdict) {
  return std::to_string(verdict.from) + " " + std::to_string(verdict.below) + " " +
         (verdict.refused ? "1" : "0") + "\n" + verdict.summary;
}

SingleCopyRecord read_single_copy_record(const std::string& record, int rank) {
  const size_t end = record.find('\n');
  const std::string_view head = std::string_view(record).substr(0, end);
  const size_t first = head.find(' ');
  const size_t second = first == std::string_view::npos ? first : head.find(' ', first + 1);
  SingleCopyRecord verdict;
  if (end == std::string::npos || second == std::string_view::npos ||
      !whole_number(head.substr(0, first), verdict.from) ||
      !whole_number(head.substr(first + 1, second - first - 1), verdict.below) ||
      (head.substr(second + 1) != "0" && head.substr(second + 1) != "1")) {
    throw malformed("single-copy verdict", rank);
  }
  verdict.refused = head.substr(second + 1) == "1";
  verdict.summary = record.substr(end + 1);
  return verdict;
}

}  // namespace ibcoll::runtime
