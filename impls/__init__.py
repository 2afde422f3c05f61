"""ftspec.impls: the plugin contract, discovery, and the bundled NumPy,
PyTorch and JAX implementations (each registered through an entry point
like any outside plugin)."""
