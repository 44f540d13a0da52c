// A rank entry as a CommonJS project writes one: module.exports, require() of the library.
const { Tensor } = require('../../dist/index.js');

module.exports = async function main(ctx) {
  const t = Tensor.full([2], ctx.rank + 1);
  await ctx.world.allReduce(t);
  return t.toArray();
};
