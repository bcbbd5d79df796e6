FROM python:3.11-slim
WORKDIR /app
COPY requirements.lock pyproject.toml README.md ./
RUN pip install --no-cache-dir -r requirements.lock
COPY server ./server
RUN pip install --no-cache-dir --no-deps .
RUN useradd --system werk
USER werk
ENV WERK_HOST=0.0.0.0 WERK_PORT=7420
EXPOSE 7420 7419
CMD ["werk", "serve"]
