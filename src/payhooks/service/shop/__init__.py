"""The reference business built on payhooks: catalogue, carts, checkout, payments, orders."""
