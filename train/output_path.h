// Where a command will write, checked before it does its work: a sweep of minutes must not end in
// "cannot open for writing". Each check only looks (it writes nothing) and throws an InputError that
// names the option or recipe key the path came from, the path, and what was expected:
//
//   check_output_file("plot --out", "figs/curves.png");
//     // plot --out 'figs/curves.png': the folder 'figs' does not exist; expected a file in an
//     // existing folder that can be written
//   check_output_folder("inspect --out", "maps");   // a folder the command creates, or writes into
#pragma once
#include <filesystem>
#include <string>

namespace tf::train {

// A file the command writes (or replaces): not a folder; its folder exists and can be written; a file
// already there can be replaced. `option`: how the user names the path ("plot --out").
void check_output_file(const std::string& option, const std::filesystem::path& file);

// A folder the command creates with its parents, or writes into: not a file; when it exists it can be
// written, else its nearest existing ancestor is a folder that can be written.
void check_output_folder(const std::string& option, const std::filesystem::path& dir);

}  // namespace tf::train
