// fuzz_make_corpus: the seeds of fuzz_data_files.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {

// fuzz_data_files: calls on the --data-dir files (fuzz_data_files.cpp: the
// first byte is the call in its low 3 bits (0 and 1: builds of a uint32 and of
// a string-keyed index), the index a/b/c/named-by-the-file in
// the next 2, bit 5 LoadIndex's replace; the rest is the file name).
void DataFilesTarget(Writer& w) {
  const std::string t = "fuzz_data_files";
  enum : uint8_t {
    kBuild = 0,
    kBuildKeys = 1,
    kSave = 2,
    kLoad = 3,
    kDelete = 5,
    kDrop = 6,
    kList = 7
  };
  enum : uint8_t { kA = 0 << 3, kB = 1 << 3, kNamed = 3 << 3, kReplace = 0x20 };
  auto calls = [](std::initializer_list<std::pair<uint8_t, std::string>> list) {
    std::string out;
    for (const auto& [op, file] : list) AppendFrame(std::string(1, char(op)) + file, &out);
    return out;
  };
  w.Put(t, "copy_round_trip",
        calls({{kBuild | kA, ""}, {kSave | kA, "a-copy.bin"}, {kList, ""},
               {kLoad | kB, "a-copy.bin"}, {kDelete, "a-copy.bin"}, {kDrop | kA, ""}}));
  w.Put(t, "save_into_other_snapshot",
        calls({{kBuild | kA, ""}, {kSave | kA, "b.gjsnap"}, {kBuild | kB, ""},
               {kSave | kA, "b.gjsnap"}, {kSave | kA, "a.gjsnap"}, {kDelete, "b.gjsnap"}}));
  w.Put(t, "load_own_and_other",
        calls({{kBuild | kA, ""}, {kBuild | kB, ""}, {kLoad | kA | kReplace, ""},
               {kLoad | kA | kReplace, "b.gjsnap"}, {kBuild | kA, ""}, {kLoad | kA, ""}}));
  w.Put(t, "reserved_names",
        calls({{kBuild | kA, ""}, {kSave | kA, ".hidden"}, {kSave | kA, "x.gjsnap.tmp-1"},
               {kSave | kA, ".."}, {kSave | kA, "a/b"}, {kDelete, ".a.gjsnap.gjsnap.tmp-1-0"},
               {kLoad | kB, "../a.gjsnap"}}));
  w.Put(t, "dropped_then_missing",
        calls({{kBuild | kA, ""}, {kDrop | kA, ""}, {kLoad | kA, ""}, {kDelete, "a.gjsnap"},
               {kDrop | kA, ""}}));
  w.Put(t, "key_schema_round_trip",
        calls({{kBuildKeys | kA, ""},
               {kSave | kA, "a-copy.bin"},
               {kLoad | kB, "a-copy.bin"},
               {kBuild | kA, ""},
               {kBuildKeys | kB, ""},
               {kLoad | kA | kReplace, "b.gjsnap"},
               {kSave | kA, ""},
               {kDrop | kB, ""}}));
  w.Put(t, "odd_index_names",
        calls({{kBuild | kNamed, ".y.gjsnap.tmp-3"}, {kBuild | kNamed, "x.gjsnap"},
               {kSave | kNamed, "x.gjsnap"}, {kList, ""}, {kDrop | kNamed, ".y.gjsnap.tmp-3"}}));
}

}  // namespace gpujoin::fuzz::corpus
