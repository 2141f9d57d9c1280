// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln_train: the Learner, metrics and renderers (include/kiln/train.h).
