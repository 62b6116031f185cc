"""Valid inputs for `tfbridge gradtest examples/inverse_diffusion --inputs <this file>`:
the op refuses gradtest's default random samples, whose kappa is not positive."""
import numpy as np

_n = 40                                          # cells
_x = (np.arange(_n) + 0.5) / _n                  # cell midpoints
kappa = 1.0 + 0.5 * np.sin(2 * np.pi * _x)       # positive: A is positive definite
f = np.exp(-((np.arange(1, _n) / _n - 0.3) / 0.1) ** 2)
