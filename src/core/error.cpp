#include "baton/error.h"

namespace baton {

std::string format_loc(SourceLoc loc) {
  std::string_view file = loc.file_name();
  if (auto slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
  return str(file, ":", loc.line());
}

Error::Error(std::string_view op, const std::string& message, SourceLoc loc)
    : std::runtime_error(str("[", op, "] ", message, " (at ", format_loc(loc), ")")),
      op_(op),
      where_(format_loc(loc)) {}

}  // namespace baton
