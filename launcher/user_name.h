// A user as messages name it: the engine's (train/io/user_name.h), which names the owners of
// folders and files it refuses.
#pragma once

#include "train/io/user_name.h"
