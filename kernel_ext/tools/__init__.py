"""The tool surface: specs (``base``), the catalog (``registry``), one module per family."""
