// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln_data: datasets, sources, transforms and the data loader (include/kiln/data.h).
