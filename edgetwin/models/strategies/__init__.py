"""The shipped strategies, one module each; ``edgetwin.models.registry`` lists them."""
