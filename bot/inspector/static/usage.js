/* threadbot inspector: the usage page's charts (docs/architecture.md, "Usage charts").

   For each chart container (id="chart-day", "chart-channel", "chart-model") it fetches
   usage.json?by=...[&since=...] (the object `threadbot usage --json` prints) and draws
   it with the vendored uPlot (static/vendor/uplot): per UTC day, per channel and per
   model, cost and tokens as bars side by side (a day without calls has no bar: a line
   between two days would draw spending that did not happen). Cost is in dollars
   (cost_micro_usd / 1e6), on the left axis; tokens on the right. A line whose calls had
   no price has no cost point or bar (null), never a cost of $0. Once drawn, a container
   carries data-drawn="N" (its number of lines) and the chart is in
   window.usageCharts[by] (its .data: [x, cost $, tokens]); data-drawn="failed" if the
   figures could not be fetched. The tables under the charts hold the same figures. */
(function () {
  "use strict";

  const root = document.getElementById("usage");
  if (root === null || typeof uPlot === "undefined") {
    return;
  }
  const HEIGHT = 260;
  const COST = "#0b6bcb";
  const TOKENS = "#b54708";
  const charts = {};
  window.usageCharts = charts;

  function url(by) {
    const params = new URLSearchParams({ by: by });
    if (root.dataset.since) {
      params.set("since", root.dataset.since);
    }
    return root.dataset.json + "?" + params.toString();
  }

  function width(element) {
    return Math.max(element.clientWidth, 320);
  }

  function dollars(micro) {
    return micro === null ? null : micro / 1e6;
  }

  // A legend's value: "-" when the cursor is on no line, else the line's figure.
  function costShown(u, value, series, i) {
    if (i === null || i === undefined) {
      return "-";
    }
    return value === null || value === undefined ? "no price" : "$" + value.toFixed(6);
  }

  function tokensShown(u, value, series, i) {
    if (i === null || i === undefined || value === null || value === undefined) {
      return "-";
    }
    return value.toLocaleString("en");
  }

  function fromZero(u, min, max) {
    return [0, max !== null && max > 0 ? max * 1.1 : 1];
  }

  function yAxes() {
    return [
      {
        scale: "usd",
        label: "cost $",
        stroke: COST,
        size: 70,
        values: function (u, splits) {
          return splits.map(function (v) { return "$" + v; });
        },
      },
      {
        scale: "tokens",
        label: "tokens",
        stroke: TOKENS,
        side: 1,
        size: 70,
        grid: { show: false },
        values: function (u, splits) {
          return splits.map(function (v) { return v.toLocaleString("en"); });
        },
      },
    ];
  }

  function figures(report) {
    return {
      keys: report.lines.map(function (line) { return line.key; }),
      cost: report.lines.map(function (line) { return dollars(line.cost_micro_usd); }),
      tokens: report.lines.map(function (line) { return line.tokens; }),
    };
  }

  function perKey(report, element) {
    const shown = figures(report);
    const places = shown.keys.map(function (key, i) { return i; });
    function bars(align) {
      return uPlot.paths.bars({ size: [0.35, 80], align: align });
    }
    const options = {
      width: width(element),
      height: HEIGHT,
      scales: {
        x: { time: false, range: function () { return [-0.5, places.length - 0.5]; } },
        usd: { range: fromZero },
        tokens: { range: fromZero },
      },
      series: [
        {
          label: report.by,
          value: function (u, i) { return i === null ? "-" : shown.keys[i]; },
        },
        { label: "cost $", scale: "usd", stroke: COST, fill: COST + "99", paths: bars(-1), points: { show: false }, value: costShown },
        { label: "tokens", scale: "tokens", stroke: TOKENS, fill: TOKENS + "99", paths: bars(1), points: { show: false }, value: tokensShown },
      ],
      axes: [
        {
          splits: function () { return places; },
          values: function (u, splits) {
            return splits.map(function (i) { return shown.keys[i] === undefined ? "" : shown.keys[i]; });
          },
        },
      ].concat(yAxes()),
    };
    return new uPlot(options, [places, shown.cost, shown.tokens], element);
  }

  function draw(element) {
    const by = element.dataset.by;
    fetch(url(by), { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("usage.json answered " + response.status);
        }
        return response.json();
      })
      .then(function (report) {
        if (report.lines.length === 0) {
          element.textContent = "No model calls.";
        } else {
          charts[by] = perKey(report, element);
        }
        element.dataset.drawn = String(report.lines.length);
      })
      .catch(function (error) {
        element.textContent = "The chart could not be drawn: " + error.message;
        element.classList.add("failed");
        element.dataset.drawn = "failed";
      });
  }

  root.querySelectorAll(".chart[data-by]").forEach(draw);

  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (by) {
      const element = document.getElementById("chart-" + by);
      charts[by].setSize({ width: width(element), height: HEIGHT });
    });
  });
})();
