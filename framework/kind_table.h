// Tables of kinds: an enum's values described by rows with a `kind` field (Note [feed-forward kinds],
// Note [mixer support]). These read such a table.
#pragma once
#include <cstddef>

namespace tf {

// The row of `kind` (every kind has one; the first row otherwise).
template <class Row, std::size_t N, class Kind>
constexpr const Row& row_of(const Row (&table)[N], Kind kind) {
  for (const Row& row : table)
    if (row.kind == kind) return row;
  return table[0];
}

// The kinds in the table's order, as a range (a recipe's list of choices).
template <class Row, std::size_t N>
constexpr auto kinds_of(const Row (&table)[N]) {
  using Kind = decltype(Row::kind);
  struct Kinds {
    Kind values[N];
    const Kind* begin() const { return values; }
    const Kind* end() const { return values + N; }
  } kinds{};
  for (std::size_t i = 0; i < N; ++i) kinds.values[i] = table[i].kind;
  return kinds;
}

}  // namespace tf
