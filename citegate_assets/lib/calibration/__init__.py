"""Calibration: hand labels and own labels, and the judge's false pass and false fail rates against them."""
