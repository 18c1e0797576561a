// Per-vocabulary cache of token classifications by grammar position (see mask_cache.cpp).
#pragma once

namespace tmill::grammar {

class MaskCache {
 public:
  MaskCache() = default;
};

}  // namespace tmill::grammar
