// gpujoin join, first steps: the options checked and split, and the inputs
// opened with each side's first batch (join_steps.hpp).
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "commands/join/join_steps.hpp"

namespace gpujoin::cli {
namespace {

// `--right index:NAME` names a resident index.
constexpr std::string_view kIndexPrefix = "index:";

}  // namespace

JoinOptions ParseJoinOptions(const JoinArgs& a) {
  JoinOptions o;
  // --right index:NAME names a resident index instead of a file; the join then
  // writes the left rows with the index's payload columns (or --select).
  o.name = a.name;
  o.right_file = a.right;
  if (a.right.rfind(kIndexPrefix, 0) == 0) {
    if (!a.name.empty()) {
      UsageFail("join: give the index as NAME or as --right index:NAME, not both");
    }
    o.name = a.right.substr(kIndexPrefix.size());
    if (o.name.empty()) UsageFail("join: --right index: needs an index name (index:NAME)");
    o.right_file.clear();
    o.payload_join = true;
  }
  if (a.select && o.name.empty()) {
    UsageFail("join: --select needs a resident index (NAME or --right index:NAME)");
  }
  o.kind = InputOrDie(ParseJoinHow(a.how));
  if (!a.right_duplicates.empty() && !o.name.empty()) {
    UsageFail(absl::StrCat("join: --right-duplicates is for ad-hoc joins; index '", o.name,
                           "' has its own policy (index build --duplicates)"));
  }
  o.left_col = a.on;
  o.right_col = a.on;
  if (const size_t eq = a.on.find('='); eq != std::string::npos) {
    o.left_col = a.on.substr(0, eq);
    o.right_col = a.on.substr(eq + 1);
    if (o.left_col.empty() || o.right_col.empty()) {
      UsageFail(absl::StrCat("join: --on '", a.on, "' must be COL or LEFTCOL=RIGHTCOL"));
    }
    if (!o.name.empty()) {
      UsageFail(
          "join: --on LEFTCOL=RIGHTCOL is for ad-hoc joins; a resident index already has "
          "its keys (use --on LEFTCOL)");
    }
  }
  if (o.name.empty() && o.right_file.empty()) {
    UsageFail(
        "join: give --right FILE (ad-hoc join), --right index:NAME or an index NAME (resident "
        "join)");
  }
  o.flag = InputOrDie(ParseKeyKind(a.key_type));
  return o;
}

void OpenJoinInputs(const Globals& g, const JoinArgs& a, const JoinOptions& o, JoinInputs* in) {
  in->left = OpenInput(g, a.left);
  RequireColumn(*in->left, o.left_col);
  if (!o.right_file.empty() && o.name.empty()) {
    in->right = OpenInput(g, o.right_file);
    RequireColumn(*in->right, o.right_col);
  } else if (!o.right_file.empty()) {
    in->right_table = Load(g, o.right_file);
  }
  in->left_more = InputOrDie(in->left->Next(&in->left_first));
  in->left_kind = o.flag == KeyKind::kAuto
                      ? InputOrDie(in->left_tracker.Observe(in->left_first, o.left_col))
                      : o.flag;
  in->right_kind = o.flag;
  if (in->right) {
    in->right_more = InputOrDie(in->right->Next(&in->right_first));
    if (o.flag == KeyKind::kAuto) {
      in->right_kind = InputOrDie(in->right_tracker.Observe(in->right_first, o.right_col));
    }
  }
}

}  // namespace gpujoin::cli
