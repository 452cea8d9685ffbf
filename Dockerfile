# One image for every service: `canary run <service>` picks which.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY client ./client
COPY shared ./shared
COPY services ./services
COPY simulator ./simulator
COPY canary ./canary
COPY config ./config
RUN pip install --no-cache-dir .
ENTRYPOINT ["canary"]
