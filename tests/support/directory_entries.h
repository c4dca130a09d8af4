// What a run leaves behind: the entries of a directory (this process's descriptors in
// /proc/self/fd, ibcoll's files in /dev/shm), compared before and after.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ibcoll::testing {

// The names in `directory` that start with `prefix`, sorted (not the descriptor this look
// itself holds open).
inline std::vector<std::string> directory_entries(const char* directory,
                                                  const std::string& prefix = "") {
  std::vector<std::string> names;
  DIR* dir = opendir(directory);
  if (!dir) return names;
  const std::string own = std::to_string(dirfd(dir));
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.starts_with(prefix) && name != own) names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ibcoll::testing
