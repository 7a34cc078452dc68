"""The review web page behind `citegate serve`: Starlette + Jinja2, no dagster import."""
