"""target-dtype: a loss got labels of the wrong dtype."""
