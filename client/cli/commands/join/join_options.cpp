// gpujoin join, first steps: the options checked and split, and the inputs
// opened with each side's first batch (join_steps.hpp).
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  // --on a,b or a=x,b=y: one part per key column.
  bool renamed = false;
  for (const std::string& part : SplitKeyColumns(a.on)) {
    std::string left = part, right = part;
    if (const size_t eq = part.find('='); eq != std::string::npos) {
      left = part.substr(0, eq);
      right = part.substr(eq + 1);
      renamed = true;
    }
    if (left.empty() || right.empty()) {
      UsageFail(absl::StrCat("join: --on '", a.on,
                             "' must be COL or LEFTCOL=RIGHTCOL (several: a,b or a=x,b=y)"));
    }
    o.left_cols.push_back(left);
    o.right_cols.push_back(right);
  }
  o.left_col = absl::StrJoin(o.left_cols, ",");
  o.right_col = absl::StrJoin(o.right_cols, ",");
  if (renamed && !o.name.empty()) {
    UsageFail(
        "join: --on LEFTCOL=RIGHTCOL is for ad-hoc joins; a resident index already has "
        "its keys (use --on LEFTCOL)");
  }
  if (o.name.empty() && o.right_file.empty()) {
    UsageFail(
        "join: give --right FILE (ad-hoc join), --right index:NAME or an index NAME (resident "
        "join)");
  }
  o.key_type = InputOrDie(ParseKeyTypeFlag(a.key_type));
  o.flag = o.key_type.kind;
  return o;
}

void OpenJoinInputs(const Globals& g, const JoinArgs& a, const JoinOptions& o, JoinInputs* in) {
  in->left = OpenInput(g, a.left);
  for (const std::string& c : o.left_cols) RequireColumn(*in->left, c);
  if (!o.right_file.empty() && o.name.empty()) {
    in->right = OpenInput(g, o.right_file);
    for (const std::string& c : o.right_cols) RequireColumn(*in->right, c);
  } else if (!o.right_file.empty()) {
    in->right_table = Load(g, o.right_file);
  }
  // Each side's key from its first batch: an integer kind (auto: the data's,
  // which the tracker keeps for the batches after), or key columns.
  auto plan_side = [&](const Table& first, const std::vector<std::string>& cols,
                       KeyKindTracker* tracker, KeyPlan* plan, KeyKind* kind) {
    // A resident index with key columns reads the left side by its schema.
    if (!o.name.empty() && cols.size() > 1) {
      plan->columns = cols;
      *kind = KeyKind::kColumns;
      return;
    }
    *plan = InputOrDie(PlanKey(first, cols, o.key_type));
    *kind = plan->kind;
    if (plan->kind != KeyKind::kColumns && o.flag == KeyKind::kAuto) {
      *kind = InputOrDie(tracker->Observe(first, cols[0]));
    }
  };
  in->left_more = InputOrDie(in->left->Next(&in->left_first));
  plan_side(in->left_first, o.left_cols, &in->left_tracker, &in->left_plan, &in->left_kind);
  in->right_kind = o.flag;
  if (in->right) {
    in->right_more = InputOrDie(in->right->Next(&in->right_first));
    plan_side(in->right_first, o.right_cols, &in->right_tracker, &in->right_plan,
              &in->right_kind);
  }
}

}  // namespace gpujoin::cli
