// The precompiled header shared by every seqbench target: LibTorch's umbrella header
// costs ~18 s per translation unit without it.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
