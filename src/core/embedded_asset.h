// A file embedded into the binary at build time by tm_embed_assets() (cmake/tm_embed.cmake), e.g. the
// bench-serve HTML report's script and style. Each tm_embed_assets() call generates a header declaring, in
// the namespace it names:
//   std::span<const tmill::EmbeddedAsset> all();             // every file, sorted by path
//   const tmill::EmbeddedAsset* find(std::string_view path); // nullptr when not embedded
#pragma once

#include <string_view>

namespace tmill {

struct EmbeddedAsset {
  std::string_view path;          // relative to its asset folder, '/'-separated: "report.js", "css/app.css"
  std::string_view bytes;         // the file's exact contents (may contain NULs; no terminator added)
  std::string_view content_type;  // from the extension: "text/javascript; charset=utf-8", "image/png", ...
};

}  // namespace tmill
