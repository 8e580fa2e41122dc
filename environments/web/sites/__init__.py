"""The three sites of the web world, one Flask blueprint each: shop, travel, mail."""
