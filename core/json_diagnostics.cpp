// (empty: being written)
