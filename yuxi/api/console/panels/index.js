// The side panels, in tab order. A panel is one module exporting
//   {id, label (an i18n key), requires: [OpenAPI paths], needsThread, mount(ctx, host)}
// where mount fills `host` and may return a cleanup function. The shell shows a panel
// only when every path it requires is in the server's /schema/openapi.json, so a panel
// for an API that does not exist yet is absent, and appears once its routes land. To
// add one: write panels/<name>.js and list it here.

import config from "./config.js";
import files from "./files.js";
import jobs from "./jobs.js";
import knowledge from "./knowledge.js";
import models from "./models.js";
import queue from "./queue.js";
import run from "./run.js";
import state from "./state.js";
import usage from "./usage.js";
import workspace from "./workspace.js";

export const PANELS = [queue, run, files, state, config, workspace, knowledge, models, usage, jobs];
