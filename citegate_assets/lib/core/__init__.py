"""The shared bottom: paths, SQL files, the config fields' checks, surfaces, terminal text, processes, locks."""
